"""Routing's pure core: the network-state fold (links, view) and the resolve scoring (scoring)."""
