"""The upstream wire contract in code: paths, encodings, parameter rules and error styles.

Both the sandbox upstream and the read API speak this contract, so it lives in one place.
"""
