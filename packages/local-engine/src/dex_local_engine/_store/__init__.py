"""Layer 2, the store: SQLite (one transaction per transition) and the Stream logs.

It knows rows, not transitions; the machine above decides what to write.
"""
