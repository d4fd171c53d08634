"""Forgetting a person: erasing a lead's or a contractor's every copy the mirror holds.

The warehouse's rows and suppressions (``warehouse``, ``suppressions``), the files and objects
published from it (``copies``), the exports written outside the mirror (``exports``) and the
audit log of each erasure (``audit``).
"""
