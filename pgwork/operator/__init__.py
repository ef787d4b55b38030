"""The pgwork Kubernetes operator: a `JobQueue` custom resource and the kopf handlers that own
its worker Deployment, reaper and retention CronJobs and metrics Service, and scale the workers
on the queue's backlog. Pure parts (spec, render, scaling, deletion_cost) do no I/O."""
