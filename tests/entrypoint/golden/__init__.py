"""The shim's golden outputs: the case matrix (cases.py), the capture (capture.py) and the rank script (job.py)."""
