"""The node side: admission over a node state, and its crash-safe persistence."""
