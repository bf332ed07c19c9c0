"""What went wrong and how to fix it: deadlock wait-for graphs, races, out-of-bounds names, unwritten or NaN
outputs, the releases each lane owes, the writes that differ between schedules, and repairs that prove themselves."""
