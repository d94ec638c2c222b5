"""The `lazyfuel` subcommands, one module per family (`contracts`, `bindings`: judge and audit,
`devices`, `graphs`: run, explain and bench), each with the function that adds its parsers;
`lazyfuel.cli` builds the parser from them and runs the one asked for."""
