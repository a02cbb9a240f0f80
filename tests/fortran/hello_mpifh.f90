! Fortran through mpif.h (include 'mpif.h'): MPI_Init, Comm_rank/size, Send/Recv with a
! status array (MPI_STATUS_SIZE, MPI_SOURCE/MPI_TAG indices, MPI_Get_count), wildcards,
! Bcast, Allreduce on INTEGER and DOUBLE PRECISION (and in place with MPI_IN_PLACE),
! Gather, Barrier, a derived type (MPI_Type_vector), Isend/Irecv/Waitall, Comm_split,
! Wtime, Finalize. Every value is checked; a failure calls MPI_Abort; a passing rank
! prints "PASS hello_mpifh rank <r>" last. At least 2 ranks (2 and 3 tested).
program hello_mpifh
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, nprocs, i, r, cnt, vtype, sub, srank, ssize
  integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 2), reqs(2)
  integer :: ibuf(10), isum, gathered(64), grid(3, 4), col(4), sendv(5), recvv(5)
  double precision :: d(3), dmax, t1, t2

  call MPI_Init(ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Init')
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call check(nprocs >= 2 .and. nprocs <= 64, 'needs 2 to 64 ranks')
  t1 = MPI_Wtime()

  ! Rank 0 sends to each rank with its own tag; received with wildcards.
  if (rank == 0) then
    do r = 1, nprocs - 1
      do i = 1, 10
        ibuf(i) = 100 * r + i
      end do
      call MPI_Send(ibuf, 10 - r / 2, MPI_INTEGER, r, 40 + r, MPI_COMM_WORLD, ierr)
    end do
  else
    ibuf = -1
    call MPI_Recv(ibuf, 10, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
    call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
    call check(status(MPI_SOURCE) == 0 .and. status(MPI_TAG) == 40 + rank, 'status source/tag')
    call check(cnt == 10 - rank / 2, 'MPI_Get_count')
    call check(ibuf(1) == 100 * rank + 1 .and. ibuf(cnt) == 100 * rank + cnt, 'received data')
  end if

  ! Bcast of INTEGER and DOUBLE PRECISION from the last rank.
  ibuf = 0
  d = 0d0
  if (rank == nprocs - 1) then
    ibuf = (/ (i * 7, i = 1, 10) /)
    d = (/ 1.5d0, -2.25d0, 1d300 /)
  end if
  call MPI_Bcast(ibuf, 10, MPI_INTEGER, nprocs - 1, MPI_COMM_WORLD, ierr)
  call MPI_Bcast(d, 3, MPI_DOUBLE_PRECISION, nprocs - 1, MPI_COMM_WORLD, ierr)
  call check(ibuf(10) == 70 .and. d(1) == 1.5d0 .and. d(2) == -2.25d0 .and. d(3) == 1d300, 'bcast')

  ! Allreduce: sum of ranks, max of doubles, and the sum again in place.
  call MPI_Allreduce(rank, isum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(isum == nprocs * (nprocs - 1) / 2, 'allreduce sum')
  call MPI_Allreduce(dble(rank) + 0.5d0, dmax, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  call check(dmax == dble(nprocs) - 0.5d0, 'allreduce max')
  isum = rank + 1
  call MPI_Allreduce(MPI_IN_PLACE, isum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call check(isum == nprocs * (nprocs + 1) / 2, 'allreduce in place')

  ! Gather at rank 0.
  gathered = -1
  call MPI_Gather(rank * 3, 1, MPI_INTEGER, gathered, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    do r = 0, nprocs - 1
      call check(gathered(r + 1) == 3 * r, 'gather')
    end do
  end if
  call MPI_Barrier(MPI_COMM_WORLD, ierr)

  ! A derived type: row 2 of a 3x4 column-major array, sent to the next rank.
  call MPI_Type_vector(4, 1, 3, MPI_INTEGER, vtype, ierr)
  call MPI_Type_commit(vtype, ierr)
  do i = 1, 4
    do r = 1, 3
      grid(r, i) = 10 * rank + 100 * r + i
    end do
  end do
  col = -1
  call MPI_Sendrecv(grid(2, 1), 1, vtype, mod(rank + 1, nprocs), 7, col, 4, MPI_INTEGER, &
                    mod(rank + nprocs - 1, nprocs), 7, MPI_COMM_WORLD, status, ierr)
  r = mod(rank + nprocs - 1, nprocs)
  call check(col(1) == 10 * r + 201 .and. col(4) == 10 * r + 204, 'derived type')
  call MPI_Type_free(vtype, ierr)

  ! Isend/Irecv around the ring, Waitall with a statuses array.
  sendv = (/ (rank * 10 + i, i = 1, 5) /)
  recvv = -1
  call MPI_Irecv(recvv, 5, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), 9, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(sendv, 5, MPI_INTEGER, mod(rank + 1, nprocs), 9, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, statuses, ierr)
  call check(reqs(1) == MPI_REQUEST_NULL .and. statuses(MPI_SOURCE, 1) == r, 'waitall statuses')
  call check(recvv(5) == r * 10 + 5, 'isend/irecv data')

  ! Split into even and odd ranks, reversed.
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, sub, ierr)
  call MPI_Comm_rank(sub, srank, ierr)
  call MPI_Comm_size(sub, ssize, ierr)
  call check(ssize == (nprocs + 1 - mod(rank, 2)) / 2, 'split size')
  call check(srank == ssize - 1 - rank / 2, 'split rank')
  call MPI_Allreduce(rank, isum, 1, MPI_INTEGER, MPI_SUM, sub, ierr)
  cnt = 0
  do r = mod(rank, 2), nprocs - 1, 2
    cnt = cnt + r
  end do
  call check(isum == cnt, 'allreduce on the split')
  call MPI_Comm_free(sub, ierr)

  t2 = MPI_Wtime()
  call check(t2 >= t1 .and. MPI_Wtick() > 0d0, 'wtime')
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  print '(a,i0)', 'PASS hello_mpifh rank ', rank
  call MPI_Finalize(ierr)

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print '(a,i0,a,a)', 'FAIL rank ', rank, ': ', what
      call MPI_Abort(MPI_COMM_WORLD, 3, e)
    end if
  end subroutine check
end program hello_mpifh
