"""Network labs: where the client, the router and the target live."""
