"""Closed chains above the dynamics: pre-modeling, Ehsani's derivative routes, the
traditional constraint-Jacobian route and the index-1 DAE baseline (public names in
`jaxmb.constraints`)."""
