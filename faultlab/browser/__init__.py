"""faultlab and the browser: web pages in the lab (issue #29).

- `serve`: `LabHttp`, the lab's HTTP server on loopback for a page's files and the booking
  backend's routes.
"""
