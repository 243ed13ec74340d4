"""The recipe: options, dataset, rollouts through the proxy and Harbor, outcomes, training."""
