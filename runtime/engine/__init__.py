"""Driving one run: the loop (prepare a turn, call the model, checkpoint, run the tools),
how a run ends, its cursor, the prompt and the context window, the call gate and the
caps, agents, tracing, and the files a run reads."""

__all__: list[str] = []
