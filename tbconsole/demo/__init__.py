"""The demo: its recipe (placeholders, bundled tasks), parameterised task variants and the
supervised warm-up of its starting policy."""
