"""The serve row of issue 16, shared by bench/issue16.sh and
bench/serve_starts.sh: start a runner, run bursts of local starts over
HTTP (and of bare `bash -c true` for the floor), and end the runner's
supervisor afterwards."""
import json, os, subprocess, threading, time, urllib.request


def serve(exe, home):
    """Starts `exe serve` on a fresh port with HERMES_HOME=home and returns
    the process and its address."""
    env = dict(os.environ, HERMES_HOME=home)
    srv = subprocess.Popen([exe, 'serve', '--listen', '127.0.0.1:0'], stderr=subprocess.PIPE, env=env)
    for line in srv.stderr:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get('msg') == 'listening':
            threading.Thread(target=lambda: [None for _ in srv.stderr], daemon=True).start()
            return srv, rec['addr']
    raise SystemExit(f'{exe} serve did not listen')


def burst(job, total=160, workers=8):
    """Runs job total times from workers threads; returns jobs per second."""
    left = [total]; lock = threading.Lock()
    def worker():
        while True:
            with lock:
                if left[0] == 0: return
                left[0] -= 1
            job()
    ts = [threading.Thread(target=worker) for _ in range(workers)]
    t = time.perf_counter()
    for x in ts: x.start()
    for x in ts: x.join()
    return total / (time.perf_counter() - t)


def http_start(addr):
    req = urllib.request.Request(f'http://{addr}/v1/processes', data=b'{"command":"true","backend":"local"}',
                                 headers={'Content-Type': 'application/json'})
    urllib.request.urlopen(req).read()


def exec_start():
    subprocess.run(['bash', '-c', 'true'], check=True)


def stop_supervisors(home_prefix):
    """Ends the supervisors (hermes supervise) of profiles under
    home_prefix: a runner's local jobs run there, and it outlives the
    runner, so it is ended before the profiles are removed."""
    for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
        try:
            cmd = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\0')
            envs = open(f'/proc/{pid}/environ', 'rb').read().split(b'\0')
        except OSError:
            continue
        if cmd[1:2] == [b'supervise'] and any(e.startswith(f'HERMES_HOME={home_prefix}'.encode()) for e in envs):
            os.kill(int(pid), 15)
            end = time.time() + 10
            while os.path.exists(f'/proc/{pid}') and time.time() < end:
                time.sleep(0.05)
