"""Claims: a small insurance-claims back office (adjusters triage, approve, deny and pay claims).

Written the way a product team would write it: real clock, random ids, a background
worker, outbound HTTP to vendors and a password login.
"""
