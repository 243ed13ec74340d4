"""One-home helpers: atomic writes, JSON-lines reading, percentiles, formatting, inert text,
offline defaults, process groups, CPU shares, tokenizer files. They import nothing of tbconsole."""
