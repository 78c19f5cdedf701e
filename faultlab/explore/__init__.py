"""`faultlab explore`: search a profile's fault space for the schedules that make it fail, and
shrink each distinct failure to the smallest profile that still fails.

`.space` declares the space (a profile's `explore:` block) and its points, `.schedule` writes a
point as a profile, `.search` proposes refinements and simpler schedules, `.journal` keeps what
was measured, `.exploration` runs the phases, `.result` and `.page` write what was found.
"""
