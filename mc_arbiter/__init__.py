"""Memory-controller queue and arbitration: round-robin and communication-aware MCA (issue: mc_arbiter/)."""
