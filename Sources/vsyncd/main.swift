print("vsyncd: not built yet")
