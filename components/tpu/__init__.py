"""The pure TPU model: shapes and machines, admission in cubes, model sizing (no Pulumi)."""
