"""The evaluation harness: policies × workloads × seeds × loads → metrics tables, confidence intervals, plots."""
