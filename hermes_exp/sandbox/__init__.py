"""Where tool commands run: one fresh sandbox per prompt (local, bwrap, docker)."""
