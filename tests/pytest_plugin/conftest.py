# project/ is a user's GPU test suite: run only under the plugin, in a subprocess (test_plugin.py)
collect_ignore = ["project"]
