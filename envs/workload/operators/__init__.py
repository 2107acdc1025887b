"""Operators' formats: what a site's own Slurm and Kubernetes print (sacct, scontrol and sinfo, kubectl nodes and
pods, Kueue Workloads) and the Helios export, read into workloads and clusters; apart from the research traces and
the synthetic generator one level up."""
