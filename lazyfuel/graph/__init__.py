"""The dask side: lazyfuel's own graph of op nodes, the fusion pass, lowering to dask, and the
task body that runs one fused node at compute time.

`ir` holds the nodes, `ops` builds them from user input (checked), `fuse` decides what runs
together and writes each task's recipe, `task` is the task body, `lower` makes the dask array,
`explain` prints the plan.
"""
