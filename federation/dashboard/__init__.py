"""``fedctl dashboard``: the fleet in a browser, read and acted on as the user.

A small aiohttp server on 127.0.0.1 that reads the hub with the kubeconfig identity of
the person who started it (no credential of its own, never the control plane's), keeps
what it shows current with watches (:mod:`.mirror`) and pushes each page's changed
content to the browser as server-sent events. Pages are rendered on the server by
:mod:`.html`, which escapes every value it is given; the browser runs one static script
(no framework, no build step). docs/dashboard.md describes the pages and the safeguards.
"""
