"""Per 100 KB transfer in a capture directory: segments, retransmissions, its data time, and each
segment's delay from the server (w1) to the client (l1). Usage: ana_transfers.py DIR"""
import subprocess, sys, collections
def rd(f):
    out = subprocess.run(["tshark","-r",f,"-T","fields","-e","frame.time_epoch","-e","tcp.srcport","-e","tcp.dstport","-e","tcp.seq","-e","tcp.len","-e","tcp.analysis.retransmission","-o","tcp.relative_sequence_numbers:TRUE"],capture_output=True,text=True).stdout
    r=[]
    for l in out.splitlines():
        p=l.split("\t")
        if len(p)<5 or not p[1]: continue
        r.append((float(p[0]),int(p[1]),int(p[2]),int(p[3]),int(p[4]),p[5]!=""))
    return r
d=sys.argv[1]
w=rd(d+"/w1.pcap"); l=rd(d+"/l1.pcap"); l2=rd(d+"/l2.pcap")
# young flows: server port 8000 -> client
sent={}
retx=collections.Counter()
for t,s,dp,seq,ln,rx in w:
    if s==8000 and ln>0:
        if (dp,seq) not in sent: sent[(dp,seq)]=t
        if rx: retx[dp]+=1
arr={}
for t,s,dp,seq,ln,rx in l:
    if s==8000 and ln>0 and (dp,seq) not in arr: arr[(dp,seq)]=t
ports=sorted({k[0] for k in sent}, key=lambda p: min(sent[k] for k in sent if k[0]==p))
for p in ports:
    ks=sorted([k for k in sent if k[0]==p], key=lambda k: k[1])
    ds=[(arr[k]-sent[k])*1000 for k in ks if k in arr]
    t0=min(sent[k] for k in ks); t1=max(arr.get(k,0) for k in ks)
    # first SYN at l1
    syn=[t for t,s,dp,seq,ln,rx in l if s==p and dp==8000]
    print(f"port {p}: {len(ks)} segs, retx {retx[p]}, dur first data->last arr {1000*(t1-t0):.1f} ms, client start->last {1000*(t1-min(syn)):.1f}; delay min {min(ds):.1f} med {sorted(ds)[len(ds)//2]:.1f} max {max(ds):.1f}")
    # delay profile in deciles
    print("   delays:", " ".join(f"{x:.0f}" for x in ds[::4]))
    # server send gaps: list of send time offsets grouped in bursts
    st=[1000*(sent[k]-t0) for k in ks]
    print("   sends :", " ".join(f"{x:.0f}" for x in st[::4]))
