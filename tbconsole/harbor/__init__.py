"""Harbor glue: task folders, third-party agent CLIs and Harbor's own trial viewer."""
