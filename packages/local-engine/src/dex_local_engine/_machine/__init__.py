"""Layer 3, the machine: the state of every Flow and the transitions that change it.

One module per concept, ordered bottom to top (``.importlinter`` enforces it):
``work`` and ``state`` (the state, its transactions and queues), ``locks``,
``indexes``, ``children``, ``effects``, ``waits``, ``attempts``, ``steps``, ``flows``,
``subflows``, ``wakeups``, ``outcomes``, then the transitions callers start (``tasks``,
``rpc_results``, ``state_access``, ``queries``, ``search``, ``continue_as_new``,
``replay``, ``recovery``, ``resets``) and ``engine`` on top. A transition calls only
downwards; what it needs from above (a task for the Workers, a Flow to continue as
new) is queued on the state and drained before the commit.
"""
