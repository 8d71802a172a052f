"""io-wait: the program reads its input from a pipe that a slower producer fills a line
every 50 ms; its own work on each line is quick, so it spends most of its time waiting
in read()."""
import subprocess
import sys

PRODUCER = "import sys, time\nfor i in range(24):\n    time.sleep(0.05)\n    print(i, flush=True)\n"


def handle(line):
    return sum(i * i for i in range(int(line) * 200 + 1000))


if __name__ == "__main__":
    with subprocess.Popen([sys.executable, "-c", PRODUCER], stdout=subprocess.PIPE,
                          text=True) as p:
        total = sum(handle(line) for line in p.stdout)
    print(total)
