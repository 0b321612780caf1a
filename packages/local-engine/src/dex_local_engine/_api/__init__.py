"""Layer 4, the Clients' API: the Dex FlowService over the machine.

Request checks, the engine entry points, long-polls and InvokeRPC (which waits for
the Worker's answer before the machine applies it).
"""
