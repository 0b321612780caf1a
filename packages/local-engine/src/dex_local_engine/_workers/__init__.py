"""Layer 4, the Workers: pull streams (WorkerTaskService) and listening Workers.

The dispatcher runs the commands the machine queues (submit, cancel, abandon a task)
and reports what Workers send through each task's callbacks.
"""
