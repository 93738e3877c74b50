"""Near-bank op-and-store unit with HBM2 bank timing (issue: nmc/)."""
