"""A Python program cell's test subject (tests/programs_test.py): two marked phases."""
import os

fd = int(os.environ.get("ALLOCMARK_PHASE_FD", "-1"))


def phase(name):
    if fd >= 0:
        os.write(fd, f"phase {name}\n".encode())
        os.read(fd, 16)  # the driver's answer: the edge is measured


phase("build")
table = {i: str(i) * 4 for i in range(300000)}
phase("drop")
del table
print("done")
