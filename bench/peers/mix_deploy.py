"""pyinfra deploy: the benchmark's six-operation mix (the same work as bench/mix/roles/mix.py)."""
from pyinfra.operations import apt, files, server, systemd

MIX = {"mix_fin_timeout": 15, "mix_workers": 4, "mix_listen": "127.0.0.1:8000"}
HERE = __file__.rsplit("/", 2)[0]

conf = files.template(name="sysctl file", src=f"{HERE}/mix/templates/mix/91-bench-mix.conf.j2",
                      dest="/etc/sysctl.d/91-bench-mix.conf", mode="644", **MIX)
server.shell(name="apply sysctl", commands=["sysctl -p /etc/sysctl.d/91-bench-mix.conf"], _if=conf.did_change)
files.directory(name="directory", path="/opt/bench-mix", mode="755")
files.template(name="env file", src=f"{HERE}/mix/templates/mix/bench-mix.env.j2", dest="/etc/default/bench-mix",
               mode="644", **MIX)
files.put(name="copied file", src=f"{HERE}/mix/files/motd", dest="/opt/bench-mix/motd", mode="644")
apt.packages(name="packages", packages=["curl", "procps"])
systemd.service(name="service", service="containerd", running=True, enabled=True)
