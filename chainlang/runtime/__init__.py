"""The run side: compiled graphs, the interpreter, decide models, transcripts."""
