"""Engines in other processes: `mmprep worker` (server.py), the tensor wire protocol it
speaks (wire.py), and the engine that sends requests to a set of workers (remote.py)."""
