"""Services: every process the harness starts, with one lifecycle (see base.Service)."""
