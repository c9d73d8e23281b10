"""Stand-ins for the three outside vendors (fraud scoring, payments, address checks) for local runs."""
