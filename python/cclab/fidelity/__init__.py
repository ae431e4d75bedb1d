"""Fidelity: the simulator measured against the kernel engine (`cclab validate`)."""
