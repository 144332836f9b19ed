"""Engines in other processes: `mmprep worker` (server.py) and the tensor wire protocol it
speaks (wire.py). The engine that sends requests to a set of workers is app/mmprep/engines/workers.py."""
