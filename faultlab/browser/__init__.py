"""Web pages in the lab: headless Chromium in the client's namespace (`client: {browser: ...}`).

`spec` is the profile's section, `chromium` starts and ends the browser, `devtools` drives it
over its pipe, `serve` serves a folder (and backends' routes) on the client's loopback, and
`page` turns what the page does into the run's events. `python -m faultlab.browser SPEC` runs
one page as the client.
"""
