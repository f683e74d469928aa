"""`hermes-exp-report`: one self-contained HTML page of plots and a trajectory browser for a run or sweep.

Needs the optional `report` extra (Jinja2, plotly), imported only when a report is built."""
