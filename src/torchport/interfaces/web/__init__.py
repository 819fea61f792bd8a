"""The web dashboard (``torchport serve``) and the one-file report (``torchport report``).

pages.py builds every page as data from the store and the views; app.py serves them as HTML or
JSON; html.py and templates/ render them; charts.py turns views into plotted data drawn by the
vendored uPlot in static/; report.py writes pages into one file. Needs the ``[web]`` extra.
"""
