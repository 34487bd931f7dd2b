"""Frames per 5 ms at the receivers during one transfer: each bulk download (by server
port) and Y, the 100 KB reply to CLIENT_PORT. Usage: ana_bins.py DIR CLIENT_PORT"""
import subprocess, sys, collections
def rd(f):
    out = subprocess.run(["tshark","-r",f,"-T","fields","-e","frame.time_epoch","-e","tcp.srcport","-e","tcp.dstport","-e","tcp.seq","-e","tcp.len"],capture_output=True,text=True).stdout
    r=[]
    for l in out.splitlines():
        p=l.split("\t")
        if len(p)<5 or not p[1]: continue
        r.append((float(p[0]),int(p[1]),int(p[2]),int(p[3]),int(p[4])))
    return r
d=sys.argv[1]; port=int(sys.argv[2])
l=rd(d+"/l1.pcap"); l2=rd(d+"/l2.pcap")
ys=[t for t,s,dp,seq,ln in l if s==8000 and dp==port and ln>0]
t0=min(ys)-0.005; t1=max(ys)+0.005
B=0.005
bins=collections.defaultdict(collections.Counter)
for t in ys: bins[int((t-t0)/B)]['Y']+=1
for t,s,dp,seq,ln in l2:
    if t0<=t<=t1 and ln>0: bins[int((t-t0)/B)][s]+=1
keys=sorted({k for b in bins.values() for k in b}, key=str)
print("ms  "+" ".join(f"{str(k):>6}" for k in keys))
for i in range(int((t1-t0)/B)+1):
    print(f"{i*5:3d} "+" ".join(f"{bins[i][k]:6d}" for k in keys))
