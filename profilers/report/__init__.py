"""The report: its data (`gather`, built by the same functions as the terminal commands) and one offline HTML page
(`page`, plotly).

Layer: imports `costmodel`, `store` and `devicemodel`. plotly is imported by `page` alone.
"""
