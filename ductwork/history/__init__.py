"""What the mirror remembers: every version it published, and every change of every stream."""
