"""Lane-level numpy emulation of cute_kernels/inverse_f16.invert (PTX fragment layouts)."""
import numpy as np
C, HS = 64, 72
L = np.arange(32)
g, t = L // 4, L % 4

def ldsm(H, rows, cols, n, trans):
    out = []
    for j in range(n):
        mat = np.stack([H[rows[8 * j + i], cols[8 * j + i]:cols[8 * j + i] + 8] for i in range(8)])
        if trans:
            frag = np.stack([mat[2 * t, g], mat[2 * t + 1, g]], 1)
        else:
            frag = np.stack([mat[g, 2 * t], mat[g, 2 * t + 1]], 1)
        out.append(frag.astype(np.float64))
    return out

def mma(a, b, c):
    k = 8 * len(b)
    A = np.zeros((16, k)); B = np.zeros((k, 8)); Cm = np.zeros((16, 8))
    for l in range(32):
        G, T_ = g[l], t[l]
        A[G, 2*T_:2*T_+2] = a[0][l]; A[G+8, 2*T_:2*T_+2] = a[1][l]
        if len(a) == 4:
            A[G, 8+2*T_:8+2*T_+2] = a[2][l]; A[G+8, 8+2*T_:8+2*T_+2] = a[3][l]
        B[2*T_:2*T_+2, G] = b[0][l]
        if len(b) == 2:
            B[8+2*T_:8+2*T_+2, G] = b[1][l]
        Cm[G, 2*T_:2*T_+2] = c[l, 0:2]; Cm[G+8, 2*T_:2*T_+2] = c[l, 2:4]
    D = A @ B + Cm
    out = np.zeros((32, 4))
    for l in range(32):
        G, T_ = g[l], t[l]
        out[l, 0:2] = D[G, 2*T_:2*T_+2]; out[l, 2:4] = D[G+8, 2*T_:2*T_+2]
    return out

f16 = lambda x: np.asarray(x, np.float16).astype(np.float64)
def pack(lo, hi):
    return np.stack([f16(lo), f16(hi)], 1)

def neg_a(x):
    return [pack(-x[0][:, 0], -x[0][:, 1]), pack(-x[0][:, 2], -x[0][:, 3]),
            pack(-x[1][:, 0], -x[1][:, 1]), pack(-x[1][:, 2], -x[1][:, 3])]

def store(H, y, r, c, rows):
    for l in range(32):
        H[r + g[l], c + 2*t[l]:c + 2*t[l] + 2] = f16(y[l, 0:2])
        if rows == 16:
            H[r + g[l] + 8, c + 2*t[l]:c + 2*t[l] + 2] = f16(y[l, 2:4])

def invert(H):
    zero = np.zeros((32, 4))
    # 1
    newrows = {}
    for ltid in range(64):
        b8, r = (ltid // 8) * 8, ltid % 8
        newrows[ltid] = None
    X = np.zeros((64, 8))
    a = np.stack([H[i, (i // 8) * 8:(i // 8) * 8 + 8] for i in range(64)]).astype(np.float64)
    x = np.zeros((64, 8)); x[np.arange(64), np.arange(64) % 8] = 1.0
    r = np.arange(64) % 8
    for m in range(7):
        f = np.where(r > m, a[:, m], 0.0)
        for j in range(m + 1):
            tm = x[(np.arange(64) // 8) * 8 + m, j]
            x[:, j] = x[:, j] - f * tm
    for i in range(64):
        H[i, (i // 8) * 8:(i // 8) * 8 + 8] = f16(x[i])
    # 2
    for w in range(4):
        o = 16 * w; l8 = L % 8
        t22 = ldsm(H, o + 8 + l8, np.full(32, o + 8), 2, False)
        a21 = ldsm(H, o + 8 + l8, np.full(32, o), 1, True)
        xa = mma([t22[0], t22[1]], [a21[0]], zero)
        t11 = ldsm(H, o + l8, np.full(32, o), 1, True)
        y = mma([pack(-xa[:, 0], -xa[:, 1]), pack(-xa[:, 2], -xa[:, 3])], [t11[0]], zero)
        store(H, y, o + 8, o, 8)
    # 3
    lr = L % 8 + 8 * ((L // 8) % 2); lc = 8 * (L // 16)
    ys = {}
    for w in range(4):
        p, h = 32 * (w // 2), 8 * (w % 2)
        t22 = ldsm(H, p + 16 + lr, p + 16 + lc, 4, False)
        a21 = ldsm(H, p + 16 + lr, p + lc, 4, True)
        x3 = [mma(t22, [a21[0], a21[1]], zero), mma(t22, [a21[2], a21[3]], zero)]
        t11 = ldsm(H, p + lr, np.full(32, p + h), 2, True)
        ys[w] = (mma(neg_a(x3), t11, zero), p, h)
    for w, (y, p, h) in ys.items():
        store(H, y, p + 16, p + h, 16)
    # 4
    ys = {}
    for w in range(4):
        rh, ch = 16 * (w // 2), 16 * (w % 2)
        x4 = [zero] * 4
        for s in range(2):
            t22 = ldsm(H, 32 + rh + lr, 32 + 16 * s + lc, 4, False)
            for n in range(2):
                a21 = ldsm(H, 32 + 16 * s + lr, 16 * n + lc, 4, True)
                x4[2 * n] = mma(t22, [a21[0], a21[1]], x4[2 * n])
                x4[2 * n + 1] = mma(t22, [a21[2], a21[3]], x4[2 * n + 1])
        y4 = [zero, zero]
        for s in range(2):
            t11 = ldsm(H, 16 * s + lr, ch + lc, 4, True)
            na = neg_a([x4[2 * s], x4[2 * s + 1]])
            y4[0] = mma(na, [t11[0], t11[1]], y4[0])
            y4[1] = mma(na, [t11[2], t11[3]], y4[1])
        ys[w] = (y4, rh, ch)
    for w, (y4, rh, ch) in ys.items():
        for n in range(2):
            store(H, y4[n], 32 + rh, ch + 8 * n, 16)
    return H

rng = np.random.default_rng(0)
for trial in range(3):
    A = np.tril(rng.uniform(-0.3, 0.3, (64, 64)), -1)
    H = np.zeros((64, HS)); H[:, :64] = f16(A)
    T = invert(H)[:, :64]
    E = np.linalg.inv(np.eye(64) + f16(A))
    print("max rel err", np.abs(T - E).max() / np.abs(E).max(), "upper zero", np.abs(np.triu(T, 1)).max(), "diag", T.diagonal().min(), T.diagonal().max())
