"""The queue's own subcommands, one module per concern, each with `register(subparsers)`."""
