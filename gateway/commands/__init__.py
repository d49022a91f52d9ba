"""CLI subcommands; each module registers its own argparse subparser."""
